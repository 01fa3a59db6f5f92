"""Generated training data: small interactive-app task families and their tokenizer."""
