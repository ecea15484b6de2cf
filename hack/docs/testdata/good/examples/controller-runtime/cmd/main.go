package main

import "flag"

func main() {
	var n int
	flag.IntVar(&n, "max-concurrent-reconciles", 1, "workers")
	flag.Parse()
}
