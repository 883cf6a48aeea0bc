"""Private speed kernels for functional/: the same quantities as the plain forms
beside them, computed with fewer passes over memory. A test ties each kernel to
its plain form (1e-12 in float64). Students read the plain forms; nothing here
is needed to understand the math."""
