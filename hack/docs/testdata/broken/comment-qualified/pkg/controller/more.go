package controller

// metrics.Gone counts it.
const more = 1
