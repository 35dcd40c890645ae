// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

// Package tasklabels reads OpenPAI's task labels of a container from its environment, the one
// way for every component that labels a task (the task receiver's task_* series, the GPU
// attribution's task_gpu_*), so a task carries the same labels on both.
package tasklabels // import "github.com/otelcol-gpu/otelcol-gpu/internal/tasklabels"

import "strings"

// Unknown is the value of a label no source has.
const Unknown = "unknown"

// Labels are a task's labels (spec: "Task labels").
type Labels struct {
	Username, JobName, RoleName, TaskIndex, JobInstanceID, VirtualCluster string
}

// envVars maps each label to the variables it is read from, first found wins.
var envVars = [...]struct {
	label func(*Labels) *string
	vars  []string
}{
	{func(l *Labels) *string { return &l.Username }, []string{"PAI_USER_NAME"}},
	{func(l *Labels) *string { return &l.JobName }, []string{"PAI_JOB_NAME"}},
	{func(l *Labels) *string { return &l.RoleName }, []string{"PAI_CURRENT_TASK_ROLE_NAME"}},
	{func(l *Labels) *string { return &l.TaskIndex }, []string{"PAI_TASK_INDEX", "FC_TASK_INDEX"}},
	{func(l *Labels) *string { return &l.JobInstanceID }, []string{"FC_FRAMEWORK_ATTEMPT_INSTANCE_UID"}},
	{func(l *Labels) *string { return &l.VirtualCluster }, []string{"PAI_VIRTUAL_CLUSTER"}},
}

// ParseEnviron turns /proc/<pid>/environ entries ("KEY=value") into a map.
func ParseEnviron(environ []string) map[string]string {
	env := make(map[string]string, len(environ))
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	return env
}

// FromEnv reads the labels; fromEnv tells whether the environment had any of them.
func FromEnv(env map[string]string) (l Labels, fromEnv bool) {
	for _, e := range envVars {
		v := Unknown
		for _, name := range e.vars {
			if val := env[name]; val != "" {
				v, fromEnv = val, true
				break
			}
		}
		*e.label(&l) = v
	}
	return l, fromEnv
}

// Unlabelled is a task whose environment has none of the labels.
func Unlabelled() Labels {
	l, _ := FromEnv(nil)
	return l
}

// FallBackToPod names the job after its pod, "<namespace>/<pod name>", when the environment did
// not name it: a plain Kubernetes job is still a job.
func (l *Labels) FallBackToPod(namespace, pod string) {
	if l.JobName == Unknown && namespace != "" && pod != "" {
		l.JobName = namespace + "/" + pod
	}
}

// Setter is a resource builder with the task labels; every component's mdatagen builder that
// declares them is one.
type Setter interface {
	SetUsername(string)
	SetJobName(string)
	SetRoleName(string)
	SetTaskIndex(string)
	SetJobInstanceID(string)
	SetVirtualCluster(string)
}

// SetOn sets the labels on a resource builder.
func (l Labels) SetOn(s Setter) {
	s.SetUsername(l.Username)
	s.SetJobName(l.JobName)
	s.SetRoleName(l.RoleName)
	s.SetTaskIndex(l.TaskIndex)
	s.SetJobInstanceID(l.JobInstanceID)
	s.SetVirtualCluster(l.VirtualCluster)
}
