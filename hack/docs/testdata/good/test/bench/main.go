package main

import "flag"

func main() {
	n := flag.Int("n", 2000, "Books")
	_ = n
	flag.Parse()
}
