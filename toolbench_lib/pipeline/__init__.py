"""The pipeline: the study, its configuration and run folders, fused methods, recording, reproduce."""
