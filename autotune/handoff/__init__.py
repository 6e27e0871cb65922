"""What a finished study hands over: the snippets a user pastes (snippets.py: a peft
``LoraConfig`` + ``TrainingArguments``, a pinned spec) and `autotune train` (train.py, its
output layout in train_layout.py). Torch-free; ``train`` imports the worker's fit when it runs.
"""
