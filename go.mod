module github.com/v6d-io/v6d-go

go 1.26.0

require (
	github.com/apache/arrow-go/v18 v18.8.0
	golang.org/x/sys v0.50.0
)
