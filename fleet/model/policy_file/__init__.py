"""The policy file as a whole: its shape, composed of each feature's settings, and the checks that span features."""
