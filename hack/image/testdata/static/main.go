// Command static is a stand-in for the controller in image_test.go: a static binary that builds
// in seconds (the controller takes minutes on a cold cache; `make image` tests the real one).
package main

func main() {}
