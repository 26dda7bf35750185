# fsdp4j in a container, in two stages. The build stage has CUDA 13.1's nvcc, a JDK 17 and Maven,
# and builds the project (its kernels are compiled into the jar whenever nvcc is there); the runtime
# stage has CUDA 13.1's runtime libraries (cudart, cuBLAS, NCCL and the forward-compatibility
# package: the nvidia/cuda runtime image carries them), a JRE cut down with jlink, the jar, the
# native libraries fsdp4j loads already extracted, and scripts/launcher.sh (the JVM command line
# ./fsdp4j uses too) as /usr/local/bin/fsdp4j. It runs as any user id, on a read-only root.
#
# The GPU image (the defaults):   docker build -t fsdp4j .
# A CPU image, or the image on the stand-in CUDA that scripts/container-check.sh builds here, is
# the same file with other bases (BUILD_BASE, RUNTIME_BASE; both need apt-get, or a JDK 17 and
# Maven in the build base). MAVEN_MIRROR (a URL) makes Maven fetch from that repository only, for a
# build machine without Maven Central (container-check.sh serves the local ~/.m2 that way).
# The CUDA here must be the CUDA of the org.bytedeco:cuda presets in pom.xml (13.1).
ARG BUILD_BASE=docker.io/nvidia/cuda:13.1.0-devel-ubuntu24.04
ARG RUNTIME_BASE=docker.io/nvidia/cuda:13.1.0-runtime-ubuntu24.04

FROM ${BUILD_BASE} AS build
ARG MAVEN_MIRROR=
RUN if ! command -v javac >/dev/null || ! command -v mvn >/dev/null; then \
        apt-get update \
        && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends openjdk-17-jdk-headless maven binutils \
        && rm -rf /var/lib/apt/lists/*; \
    fi \
    && if [ -n "$MAVEN_MIRROR" ]; then \
        mkdir -p /root/.m2 \
        && printf '<settings><mirrors><mirror><id>build-mirror</id><mirrorOf>*</mirrorOf><url>%s</url></mirror></mirrors></settings>\n' \
           "$MAVEN_MIRROR" > /root/.m2/settings.xml; \
    fi
# nvcc, where the base has it (nvidia/cuda devel images keep it here), compiles the kernels
ENV PATH=/usr/local/cuda/bin:${PATH}
WORKDIR /src
# Dependencies and plugins in a layer of their own: the same build on the poms alone (no sources,
# the kernel script skipped) downloads them, so a change to the sources rebuilds only the project.
COPY pom.xml ./
COPY bom/pom.xml bom/
COPY runtime-core/pom.xml runtime-core/
COPY cuda-kernels/pom.xml cuda-kernels/
COPY nccl-comm/pom.xml nccl-comm/
COPY samples/pom.xml samples/
RUN mvn -B -q -Dstyle.color=never -DskipTests -DskipStandIns -Dexec.skip=true -Dmaven.javadoc.skip=true \
        -Dmaven.source.skip=true package \
    && rm -rf */target
COPY . .
# offline: a dependency the layer above missed fails here instead of downloading on every change
RUN mvn -B -q -o -Dstyle.color=never -DskipTests -DskipStandIns -Dmaven.javadoc.skip=true -Dmaven.source.skip=true package \
    && mkdir -p /opt/fsdp4j \
    && cp samples/target/fsdp4j.jar /opt/fsdp4j/fsdp4j.jar \
    && if command -v nvcc >/dev/null; then echo "kernels compiled by $(nvcc --version | tail -1)"; \
       else echo "no nvcc in the build base: a jar without GPU kernels"; fi
# The native libraries, extracted once here: at run time they load from /opt/fsdp4j/native, so no
# user needs a writable, executable ~/.javacpp or /tmp (read-only roots, noexec tmpfs, any uid).
# The OpenBLAS preset loads libopenblas.so.0 under the name libopenblas_nolapack.so.0.
RUN mkdir -p /opt/fsdp4j/native /tmp/jar && cd /tmp/jar \
    && jar xf /opt/fsdp4j/fsdp4j.jar org/bytedeco \
    && cp org/bytedeco/*/linux-*/lib*.so* /opt/fsdp4j/native/ \
    && mv /opt/fsdp4j/native/libopenblas.so.0 /opt/fsdp4j/native/libopenblas_nolapack.so.0 \
    && chmod 644 /opt/fsdp4j/native/* && ls /opt/fsdp4j/native && rm -rf /tmp/jar
# DJL's tokenizers library, the same way: a first load of a two-word tokenizer unpacks it into
# /opt/fsdp4j/djl (DJL_CACHE_DIR below), where later loads find it and write nothing
RUN mkdir -p /tmp/tok && cd /tmp/tok \
    && printf '%s' '{"version":"1.0","truncation":null,"padding":null,"added_tokens":[],"normalizer":null,'\
'"pre_tokenizer":{"type":"Whitespace"},"post_processor":null,"decoder":null,'\
'"model":{"type":"WordLevel","vocab":{"[UNK]":0,"a":1},"unk_token":"[UNK]"}}' > tokenizer.json \
    && echo 'a a' > a.txt \
    && DJL_CACHE_DIR=/opt/fsdp4j/djl java --add-modules jdk.incubator.vector -cp /opt/fsdp4j/fsdp4j.jar \
        org.fsdp4j.cli.Main data tokenize --tokenizer tokenizer.json --out shards a.txt \
    && chmod -R a+rX /opt/fsdp4j/djl && find /opt/fsdp4j/djl -name '*.so' && cd / && rm -rf /tmp/tok
# the JRE: the modules the jar needs (jdeps) and the Vector API's, without debug data (native too
# where binutils' objcopy is there), man pages or headers
RUN modules=$(jdeps --multi-release 17 --ignore-missing-deps --print-module-deps /opt/fsdp4j/fsdp4j.jar) \
    && echo "jlink modules: $modules,jdk.incubator.vector" \
    && strip=$(command -v objcopy >/dev/null && echo --strip-debug || echo --strip-java-debug-attributes) \
    && jlink --add-modules "$modules,jdk.incubator.vector" $strip --no-man-pages --no-header-files --compress=2 \
        --output /opt/fsdp4j/jre

FROM ${RUNTIME_BASE}
ARG RUNTIME_BASE
ARG VERSION=0.1.0
ARG REVISION=
LABEL org.opencontainers.image.title="fsdp4j" \
      org.opencontainers.image.description="Fully Sharded Data Parallel (ZeRO-3) training on the JVM: CUDA/NCCL GPUs or the CPU" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.base.name="${RUNTIME_BASE}"
# FreeType, HarfBuzz, fontconfig and a font: train --out draws its charts with Java's AWT, whose
# font manager needs them (and minimal bases lack them)
RUN if command -v apt-get >/dev/null; then \
        apt-get update \
        && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends libfreetype6 libharfbuzz0b \
           libfontconfig1 fonts-dejavu-core \
        && apt-get clean && rm -rf /var/lib/apt/lists/*; \
    fi
COPY --from=build /opt/fsdp4j /opt/fsdp4j
COPY scripts/launcher.sh /usr/local/bin/fsdp4j
# a user of our own without useradd (minimal bases lack it); /workspace writable by any user id,
# for runs that do not mount a folder of their own there
RUN chmod 755 /usr/local/bin/fsdp4j \
    && echo 'fsdp4j:x:10001:10001:fsdp4j:/workspace:/usr/sbin/nologin' >> /etc/passwd \
    && echo 'fsdp4j:x:10001:' >> /etc/group \
    && mkdir -p /workspace && chmod 1777 /workspace
ENV FSDP4J_JAR=/opt/fsdp4j/fsdp4j.jar \
    FSDP4J_JAVA=/opt/fsdp4j/jre/bin/java \
    FSDP4J_NATIVE_DIR=/opt/fsdp4j/native \
    DJL_CACHE_DIR=/opt/fsdp4j/djl \
    LANG=C.UTF-8
# numeric, so Kubernetes' runAsNonRoot can check it
USER 10001:10001
WORKDIR /workspace
ENTRYPOINT ["fsdp4j"]
CMD ["--help"]
