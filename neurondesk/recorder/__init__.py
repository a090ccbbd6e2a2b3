"""The wiring: the recorder process that owns a run, how it is launched, and the sources viewers
read (a live run followed through its journal, a recorded one replayed). Views never import this
package; they are handed a source."""
