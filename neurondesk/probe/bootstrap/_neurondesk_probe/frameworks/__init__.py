"""The training frameworks' own records (transformers' Trainer, Lightning), read where the framework
keeps them: figures as the numbers it logged, whatever it prints."""
