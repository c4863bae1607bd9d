module gotap.test/gosymdump

go 1.18
