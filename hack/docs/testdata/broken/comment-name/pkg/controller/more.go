package controller

// A Book waiting for its ConfigMap (see cacheBehind) is looked at again.
const more = 1
