#!/usr/bin/env bash
# The boundaries between modules, checked on the source tree:
#  1. every project #include names its header from the repository root and that file exists;
#  2. internal headers (*_internal.h, and everything under kernels/cpu/ and kernels/cuda/) are
#     included only by their own module and its tests (tests/<module>*);
#  3. the library modules depend only on the modules the architecture allows (arrows one way).
#     parallel/ is four modules, one per layer (parallel/transport, parallel/collectives,
#     parallel/datacenter, parallel/runtime); the others are their top folder. Where a module
#     may use only some headers of another, the allowed headers are listed.
# Prints each violation as file:line and exits 1 if there is any.
#   tests/layout/check_layout.sh [SOURCE_DIR]
set -uo pipefail
cd "${1:-$(dirname "$0")/../..}" || exit 2

P=parallel
declare -A allowed=(
  [common]=""
  [tokenizer]="common"
  [kernels]="common"
  [model]="common kernels"
  [compress]="common"
  [$P/transport]="common"
  [$P/collectives]="common compress $P/transport"
  [$P/datacenter]="common compress model kernels assign $P/transport $P/collectives"
  [$P/runtime]="common compress model kernels assign $P/transport $P/collectives $P/datacenter"
  [assign]="common"
  [netsim]="common assign"
  [coordinator]="common assign netsim compress model $P/transport $P/runtime"
  [peer]="common compress model kernels coordinator $P/transport $P/collectives $P/datacenter $P/runtime"
)
# module:other -> the only headers of other that module may include
declare -A only=(
  [peer:coordinator]="coordinator/protocol.h"
  [coordinator:model]="model/gpt.h"
  [coordinator:$P/runtime]="$P/runtime/run_config.h"
)

# module_of PATH: parallel/LAYER for the parallel layers, else the top folder.
module_of() {
  case $1 in
    parallel/*/*) local rest=${1#parallel/}; echo "parallel/${rest%%/*}" ;;
    *) echo "${1%%/*}" ;;
  esac
}

bad=0
report() { echo "$1"; bad=1; }

while IFS= read -r hit; do
  file=${hit%%:*}
  rest=${hit#*:}
  line=${rest%%:*}
  inc=$(sed -E 's/.*#include "([^"]+)".*/\1/' <<<"$rest")
  from=${file#./}
  from_mod=$(module_of "$from")
  inc_mod=$(module_of "$inc")
  if [[ "$inc" != */* ]]; then
    report "$from:$line: #include \"$inc\" is not a path from the repository root"
    continue
  fi
  if [ ! -f "$inc" ]; then
    report "$from:$line: #include \"$inc\" names no file in the tree"
    continue
  fi
  if [[ "$inc" =~ _internal\.h$ || "$inc" =~ ^kernels/(cpu|cuda)/ ]]; then
    if [ "$from_mod" != "$inc_mod" ] && [[ "$from" != tests/"${inc_mod%%/*}"* && "$from" != tests/"${inc_mod##*/}"* ]]; then
      report "$from:$line: includes $inc, internal to $inc_mod/"
    fi
  fi
  if [ -n "${allowed[$from_mod]+set}" ] && [ "$from_mod" != "$inc_mod" ]; then
    if [[ " ${allowed[$from_mod]} " != *" $inc_mod "* ]]; then
      report "$from:$line: $from_mod/ must not depend on $inc_mod/ ($inc)"
    elif [ -n "${only[$from_mod:$inc_mod]+set}" ] && [[ " ${only[$from_mod:$inc_mod]} " != *" $inc "* ]]; then
      report "$from:$line: $from_mod/ may include only ${only[$from_mod:$inc_mod]} of $inc_mod/ ($inc)"
    fi
  fi
done < <(grep -rn --include='*.c' --include='*.h' --include='*.cu' --include='*.cuh' \
           -E '^[[:space:]]*#[[:space:]]*include[[:space:]]+"' . \
           | grep -v -E '^\./(build[^/]*|\.git)/')

if [ $bad -ne 0 ]; then
  echo "layout: violations above"
  exit 1
fi
echo "layout: includes and module dependencies hold"
