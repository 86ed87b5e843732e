module ferry-bench/echo

go 1.22
