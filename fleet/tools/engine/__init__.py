"""The offline plan engine: the mock Pulumi engine, the plan of every stack, the policy pack's analyzer, the plan's
summary, rendered manifests and the SDK speed-ups."""
