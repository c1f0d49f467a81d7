#!/usr/bin/env bash
# Prints the number of exported top-level names (types, funcs, consts, vars;
# exported methods of exported types in a column of their own) per package of
# the root library module, and the total. scripts/count-exports.go says
# exactly what counts. Extra arguments replace the list of package
# directories (relative to the repository root), e.g.
#   bash scripts/count-exports.sh kubeletadapter imagecache
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:${PATH}"
if [ $# -eq 0 ]; then
  set -- accessor accessor/accessortest imageruntime fsstore fsstore/fsstoretest memstore pullmanager recordsdir
fi
GOWORK=off go run scripts/count-exports.go "$@"
