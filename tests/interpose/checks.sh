# Checks shared by the interposition runners (run.sh, tsan.sh), sourced: each failed check prints
# one line and sets `fail`; `$out` is the runner's folder of logs and summaries.
fail=0
note() { echo "interpose: $*"; }
bad() { echo "interpose: FAIL: $*"; fail=1; }

expect_json() {  # expect_json FILE key=value...
  local file=$1; shift
  for kv in "$@"; do
    grep -q "\"${kv%%=*}\":${kv#*=}[,}]" "$file" || bad "$(basename "$file"): expected ${kv%%=*}=${kv#*=}, got $(grep -o "\"${kv%%=*}\":[0-9]*" "$file")"
  done
}
json_num() {  # json_num FILE key: the key's number, or -1 if it is missing
  local v; v=$(grep -o "\"$2\":[0-9]*" "$1" | head -1 | cut -d: -f2)
  echo "${v:--1}"
}
