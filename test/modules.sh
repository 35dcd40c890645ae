# shellcheck shell=bash
# Sourced by the build scripts of test/ (helm, kube, prometheus, thanos). It reads modules through
# the Go module proxy using only what every proxy must serve (the version's .info with its Version
# and Time, its go.mod and its zip), and reads them with the go command's own parsers (go list -m
# templates, go mod edit -print) rather than by matching text in its JSON.
#
# Plan mode: with PLAN_ONLY=1 a script prints what it read and computed (plan lines: the go.mod,
# the replace directives, the ldflags) and stops before it compiles anything, whatever its cache
# holds; test/buildscripts_test.go runs every script so against a module proxy of its own.

# module_file FIELD MODULE@VERSION prints the GoMod (the path of the version's go.mod) or the Dir
# (its unpacked zip) of a module version, downloaded first; when the proxy has no such version the
# go command says why on stderr and this fails.
module_file() {
	go mod download "$2" >&2 && go list -m -f "{{.$1}}" "$2"
}

# module_commit MODULE@VERSION prints the commit the version was made from, or nothing: it comes
# from the Origin of the proxy's .info, which a proxy may leave out.
module_commit() {
	go list -m -f '{{with .Origin}}{{.Hash}}{{end}}' "$1"
}

# go_mod_directives KEYWORD GOMOD prints each require or replace directive of a go.mod file (in a
# block or alone) without its keyword or comments, as go mod edit -print formats it: fields
# separated by one space.
go_mod_directives() {
	go mod edit -print "$2" | sed -e 's#[[:space:]]*//.*##' |
		sed -n -e "/^$1 (\$/,/^)\$/s/^\t\(..*\)/\1/p" -e "s/^$1 \([^(].*\)/\1/p"
}

# module_requirement GOMOD PATH prints the version of PATH that a go.mod file requires.
module_requirement() {
	local path version
	while read -r path version; do
		if [[ "$path" == "$2" ]]; then
			echo "$version"
		fi
	done < <(go_mod_directives require "$1")
}

# module_replacements GOMOD prints each replace directive of a go.mod file as go mod edit's -replace
# flag takes it: old[@version]=new[@version], a directory having no version.
module_replacements() {
	local old arrow_or_version new_or_arrow version_or_new new_version
	while read -r old arrow_or_version new_or_arrow version_or_new new_version; do
		if [[ "$arrow_or_version" == "=>" ]]; then
			echo "${old}=${new_or_arrow}${version_or_new:+@${version_or_new}}"
		else
			echo "${old}@${arrow_or_version}=${version_or_new}${new_version:+@${new_version}}"
		fi
	done < <(go_mod_directives replace "$1")
}

# plan_replacements GOMOD prints, in plan mode, one plan line per replace directive of a go.mod
# file (the throwaway module's that a script builds in).
plan_replacements() {
	local replacement
	if plan_only; then
		while read -r replacement; do
			plan replace "$replacement"
		done < <(module_replacements "$1")
	fi
}

# plan_only: whether the script stops before compiling (PLAN_ONLY=1).
plan_only() {
	[[ "${PLAN_ONLY:-}" == 1 ]]
}

# plan NAME VALUE prints one line of the plan on stdout, in plan mode only.
plan() {
	if plan_only; then
		printf '%s: %s\n' "$1" "$2"
	fi
}
