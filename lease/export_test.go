package lease

// StartupAttempts is startupAttempts, for the external tests.
const StartupAttempts = startupAttempts
