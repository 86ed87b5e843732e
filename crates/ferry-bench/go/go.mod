module ferry-bench/threads

go 1.22
