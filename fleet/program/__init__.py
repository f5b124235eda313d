"""The Pulumi program: the stack settings and the build of one stack from the model and the components."""
