test_gpt2_cpu: test_gpt2.cu llmc/comm.h llmc/backend.h llmc/dist_info.h \
 llmc/config.h llmc/error.h llmc/file_util.h llmc/layout.h llmc/model.h \
 llmc/rng.h llmc/model_file.h llmc/optimizer.h llmc/zero.h test/testing.h \
 llmc/cpu/cpu_backend.h
llmc/comm.h:
llmc/backend.h:
llmc/dist_info.h:
llmc/config.h:
llmc/error.h:
llmc/file_util.h:
llmc/layout.h:
llmc/model.h:
llmc/rng.h:
llmc/model_file.h:
llmc/optimizer.h:
llmc/zero.h:
test/testing.h:
llmc/cpu/cpu_backend.h:
