#!/usr/bin/env bash
# Issue 39: how many processes compile the kernels? Each entry point runs as a new process on one
# fresh Numba cache (NUMBA_CACHE_DIR); NUMBA_DEBUG_CACHE=1 prints a "data saved" line per compiled
# kernel and a "data loaded" line per cache load. Usage: bench/compile_once.sh [CACHE_DIR] [OUT_DIR]
set -uo pipefail
cd "$(dirname "$0")/.."
export NUMBA_CACHE_DIR=${1:-/tmp/skillsight-compile-once/numba} NUMBA_DEBUG_CACHE=1
OUT=${2:-/tmp/skillsight-compile-once/out}
rm -rf "$NUMBA_CACHE_DIR" "$OUT"; mkdir -p "$NUMBA_CACHE_DIR" "$OUT"
SKILLS=data/personal/skills
TASK="write a pdf report"
echo "load before: $(uptime)"
run() {
  local name=$1; shift
  local s e; s=$(date +%s.%N); "$@" > "$OUT/$name.out" 2> "$OUT/$name.err"; e=$(date +%s.%N)
  printf '%-7s %6.1f s  compiled=%-3s loaded=%-3s compile lines on stderr=%s\n' "$name" "$(echo "$e - $s" | bc)" \
    "$(cat "$OUT/$name.out" "$OUT/$name.err" | grep -c 'data saved')" \
    "$(cat "$OUT/$name.out" "$OUT/$name.err" | grep -c 'data loaded')" "$(grep -c 'compiling' "$OUT/$name.err")"
}
MCP='{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}
{"jsonrpc":"2.0","method":"notifications/initialized"}
{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"find_skills","arguments":{"task":"'"$TASK"'"}}}'
run index  skillsight index "$SKILLS" -o "$OUT/idx"
run search skillsight search -i "$OUT/idx" "$TASK"
run serve  bash -c "printf '%s\n' '$MCP' | timeout 600 skillsight serve --mcp -i '$OUT/idx'"
run hook   bash -c "echo '{\"hook_event_name\":\"UserPromptSubmit\",\"prompt\":\"$TASK\"}' | skillsight hook claude-code -i '$OUT/idx'"
run api    python -c "from skillsight_fast import SkillIndex; i = SkillIndex.load('$OUT/idx'); print(i.search(['$TASK'] * 20, k=3).ids[0])"
echo "load after: $(uptime)"
