module bobbinbench

go 1.19
