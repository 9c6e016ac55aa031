package zklock

// PauseRelease makes each Release of l run f between its two requests
// (the read of the node and its delete), as a pause of the holder there.
func PauseRelease(l *EphemeralLock, f func()) { l.between = f }
