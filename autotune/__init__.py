"""autotune: hyperparameter tuning for LoRA fine-tuning (rank, batch size, learning rate)."""

__version__ = "0.1.0"
