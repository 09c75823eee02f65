module github.com/platinum-dev/platinum/sdk/go

go 1.26
