module mindcluster-fixtures

go 1.26
