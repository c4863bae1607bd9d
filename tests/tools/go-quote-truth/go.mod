module q
go 1.24
