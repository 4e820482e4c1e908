"""Answer-quality evaluation on labelled question sets (`manage.py evaluate`)."""
