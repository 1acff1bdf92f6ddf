#!/usr/bin/env bash
# No circles between source files: in the compiled objects of the libraries and programs (tests
# and benchmarks left out), file A calls file B when A's object uses a function that B's object
# defines. Those calls must form no loop — a file that calls back into its caller belongs with
# it, or the two need a table or a header between them. Tables of function pointers (data
# symbols) are not calls: a registry that lists its back ends is not a circle.
# Prints each loop (the files in it) and exits 1 if there is any.
#   tests/layout/check_calls.sh BUILD_DIR
set -uo pipefail
build=$(cd "${1:?usage: check_calls.sh BUILD_DIR}" && pwd) || exit 2

# source_of OBJECT: the source path an object was compiled from, relative to the source root
# (BUILD/model/CMakeFiles/wt_model.dir/data.c.o -> model/data.c).
source_of() {
  local rel=${1#"$build"/} dir="" rest
  [[ $rel == CMakeFiles/* ]] || dir=${rel%%/CMakeFiles/*}
  rest=${rel#*.dir/}
  echo "${dir:+$dir/}${rest%.o}"
}

mapfile -t objects < <(find "$build" -path '*/CMakeFiles/*.dir/*' -name '*.o' |
  grep -vE "^$build/(tests|bench)/|/CMakeFiles/(test_|fuzz_|bench-)[^/]*\.dir/|/CompilerId" | sort)
if [ ${#objects[@]} -eq 0 ]; then
  echo "check_calls: no objects under $build (build first)"
  exit 2
fi

declare -A defined_in
for o in "${objects[@]}"; do
  src=$(source_of "$o")
  while read -r sym; do defined_in[$sym]=$src; done < <(nm --defined-only -g "$o" | awk '$2 == "T" {print $3}')
done
edges=$(for o in "${objects[@]}"; do
  src=$(source_of "$o")
  for sym in $(nm -u "$o" | awk '{print $2}'); do
    to=${defined_in[$sym]:-}
    [ -n "$to" ] && [ "$to" != "$src" ] && echo "$src $to"
  done
done | sort -u)

loops=$(tsort <<<"$edges" 2>&1 >/dev/null | sed -n 's/^tsort: //p' | grep -v 'input contains a loop')
if [ -n "$loops" ]; then
  echo "check_calls: files that call each other in a loop (each loop's files, one a line):"
  tsort <<<"$edges" 2>&1 >/dev/null | sed 's/^tsort: -: input contains a loop:$/  loop:/; s/^tsort: /    /'
  exit 1
fi
echo "check_calls: $(wc -l <<<"$edges") calls between ${#objects[@]} files, no loop"
