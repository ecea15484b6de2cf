# Prints what each failing test wrote, from the output of `go test -v`:
# under -v, parallel tests interleave, and a failure's reason sits far from
# its "--- FAIL" line, amid thousands of lines of passing tests. A line
# belongs to the test named by the last "=== RUN/CONT/NAME" before it.
# Controller log lines (klog's I/W/E prefix) are left out; at most 60
# lines per test.
#   awk -f hack/test-failures.awk _output/ci/test.log

/^=== (RUN|CONT|NAME|PAUSE) / { current = $3; next }
/^ *--- FAIL: / { failed[$3] = 1; order[++nfailed] = $3 }
/^ *--- (PASS|SKIP|FAIL): / || /^(ok|FAIL|PASS)( |$)/ { next }
current != "" && !/\.go:[0-9]+: [IWE][0-9][0-9][0-9][0-9] / {
	if (count[current]++ < 60) lines[current] = lines[current] $0 "\n"
}
END {
	for (i = 1; i <= nfailed; i++) {
		name = order[i]
		if (lines[name] == "") continue
		printf "--- what %s wrote:\n%s", name, lines[name]
	}
}
