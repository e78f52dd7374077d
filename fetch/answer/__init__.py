"""What an answer carries of a document's text: grep lines and question passages, slices and cursors."""
