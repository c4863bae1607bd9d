module gotap.test/gosymload

go 1.18
