package controller

// The informers are built in pkg/controller/informers.go.
const more = 1
