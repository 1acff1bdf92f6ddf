#!/usr/bin/env bash
# No circles between source files: in the compiled objects of the libraries and programs (tests
# and benchmarks left out), file A calls file B when A's object uses a function that B's object
# defines. Those calls must form no loop — a file that calls back into its caller belongs with
# it, or the two need a table or a header between them. Tables of function pointers (data
# symbols) are not calls: a registry that lists its back ends is not a circle.
# Prints each loop (the files in it) and exits 1 if there is any.
# Objects whose source is no longer in the tree (left in a build folder by a file that moved)
# are skipped.
#   tests/layout/check_calls.sh BUILD_DIR [SOURCE_DIR]
set -uo pipefail
build=$(cd "${1:?usage: check_calls.sh BUILD_DIR [SOURCE_DIR]}" && pwd) || exit 2
src=$(cd "${2:-$(dirname "$0")/../..}" && pwd) || exit 2

mapfile -t objects < <(find "$build" -path '*/CMakeFiles/*.dir/*' -name '*.o' |
  grep -vE "^$build/(tests|bench)/|/CMakeFiles/(test_|fuzz_|bench-)[^/]*\.dir/|/CompilerId" | sort)
if [ ${#objects[@]} -eq 0 ]; then
  echo "check_calls: no objects under $build (build first)"
  exit 2
fi

# One line per symbol: "OBJECT:ADDRESS TYPE NAME" or "OBJECT: TYPE NAME"; awk names each object by its source
# (BUILD/model/CMakeFiles/wt_model.dir/data.c.o -> model/data.c) and joins uses to definitions.
edges=$({ nm -A -g --defined-only "${objects[@]}"; nm -A -u "${objects[@]}"; } 2>/dev/null |
  awk -v build="$build/" -v src="$src" '
    function source_of(o,   dir, rest) {
      sub(/:.*/, "", o); o = substr(o, length(build) + 1)
      dir = o; sub(/\/?CMakeFiles\/.*/, "", dir)
      rest = o; sub(/.*\.dir\//, "", rest); sub(/\.o$/, "", rest)
      return (dir == "" ? "" : dir "/") rest
    }
    function in_tree(f,   ok) { ok = (getline line < (src "/" f)) >= 0; close(src "/" f); return ok }
    { s = source_of($1); if (!(s in known)) known[s] = in_tree(s); if (!known[s]) next }
    $2 == "T" { defined[$3] = s; next }
    $2 == "U" { uses[s " " $3] = 1 }
    END {
      for (u in uses) {
        split(u, f, " ")
        if ((f[2] in defined) && defined[f[2]] != f[1]) print f[1], defined[f[2]]
      }
    }' | sort -u)

loops=$(tsort <<<"$edges" 2>&1 >/dev/null | sed -n 's/^tsort: //p' | grep -v 'input contains a loop')
if [ -n "$loops" ]; then
  echo "check_calls: files that call each other in a loop (each loop's files, one a line):"
  tsort <<<"$edges" 2>&1 >/dev/null | sed 's/^tsort: -: input contains a loop:$/  loop:/; s/^tsort: /    /'
  exit 1
fi
echo "check_calls: $(wc -l <<<"$edges") calls between ${#objects[@]} files, no loop"
