module ferry-bench/scale

go 1.22
