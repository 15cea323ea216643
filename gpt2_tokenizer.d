gpt2_tokenizer: dev/tools/gpt2_tokenizer.cpp llmc/error.h \
 llmc/tokenizer.h
llmc/error.h:
llmc/tokenizer.h:
