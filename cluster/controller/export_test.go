package controller

// PairBytes is pairBytes, for the measurement on the API server.
func PairBytes(imageLen, cacheKeyLen int) int { return pairBytes(imageLen, cacheKeyLen) }
