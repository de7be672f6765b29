module gannet

go 1.19
