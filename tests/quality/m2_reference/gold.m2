S Me and him went to the shop .
A 0 3|||R:PRON|||He and I|||REQUIRED|||-NONE-|||0

S The cat sat at mat .
A 3 4|||R:PREP|||on|||REQUIRED|||-NONE-|||0
A 4 4|||M:DET|||the||a|||REQUIRED|||-NONE-|||0

S He go to school every days .
A 1 2|||R:VERB:SVA|||goes|||REQUIRED|||-NONE-|||0
A 5 6|||R:NOUN:NUM|||day|||REQUIRED|||-NONE-|||0

S I has a apple .
A 1 2|||R:VERB:SVA|||have|||REQUIRED|||-NONE-|||0
A 2 3|||R:DET|||an|||REQUIRED|||-NONE-|||0
A 1 2|||R:VERB:SVA|||have|||REQUIRED|||-NONE-|||1

S She look at it .
A 1 2|||R:VERB|||is looking|||REQUIRED|||-NONE-|||0

S All good .
A -1 -1|||noop|||-NONE-|||REQUIRED|||-NONE-|||0
