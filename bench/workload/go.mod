module gotap.dev/workload

go 1.19
