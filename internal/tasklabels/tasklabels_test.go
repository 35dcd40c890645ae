// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package tasklabels

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestFromEnv(t *testing.T) {
	env := ParseEnviron([]string{"PAI_USER_NAME=alice", "PAI_JOB_NAME=alice~resnet", "FC_TASK_INDEX=3", "PATH=/bin", "junk", "PAI_VIRTUAL_CLUSTER="})
	l, fromEnv := FromEnv(env)
	assert.True(t, fromEnv)
	assert.Equal(t, Labels{Username: "alice", JobName: "alice~resnet", RoleName: Unknown, TaskIndex: "3", JobInstanceID: Unknown, VirtualCluster: Unknown}, l)

	l.FallBackToPod("team-a", "resnet-0")
	assert.Equal(t, "alice~resnet", l.JobName, "the environment wins over the pod")

	u, fromEnv := FromEnv(ParseEnviron([]string{"HOME=/root"}))
	assert.False(t, fromEnv)
	assert.Equal(t, Unlabelled(), u)
	u.FallBackToPod("team-a", "resnet-0")
	assert.Equal(t, "team-a/resnet-0", u.JobName)
	v := Unlabelled()
	v.FallBackToPod("", "")
	assert.Equal(t, Unknown, v.JobName, "no pod, no fallback")
}
