module github.com/gannet-ai/gannet/examples/go

go 1.19
