"""Training: the GRPO runner and its warm-up, the multi-process launch, the trainer's telemetry and health rules."""
