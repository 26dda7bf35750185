# fsdp4j in a container, in two stages. The build stage has CUDA 13's nvcc, a JDK 17 and Maven,
# and builds the project; its kernels are compiled into the jar whenever nvcc is there. The
# runtime stage has CUDA 13's runtime libraries (cudart, cuBLAS, NCCL: the nvidia/cuda runtime
# image carries them), a JRE cut down with jlink to the modules fsdp4j uses, and the jar; it runs
# as a non-root user with `fsdp4j` as its entry point.
#
# The base images are build arguments:
#   GPU image (the defaults):  docker build -t fsdp4j .
#   CPU image (a Debian base, no CUDA; what scripts/container-check.sh builds here):
#     buildah bud --build-arg BUILD_BASE=debian:bookworm --build-arg RUNTIME_BASE=debian:bookworm -t fsdp4j-cpu .
# Both bases must have apt-get (the build stage installs the JDK and Maven with it, unless the
# base already has them). MAVEN_MIRROR (a URL) makes Maven fetch from that repository only, for a
# build machine without Maven Central (container-check.sh serves the local ~/.m2 that way).
ARG BUILD_BASE=nvidia/cuda:13.0.1-devel-ubuntu24.04
ARG RUNTIME_BASE=nvidia/cuda:13.0.1-runtime-ubuntu24.04

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
COPY . .
RUN mvn -B -q -Dstyle.color=never -DskipTests package \
    && cp samples/target/fsdp4j.jar /fsdp4j.jar \
    && if command -v nvcc >/dev/null; then echo "kernels compiled by $(nvcc --version | tail -1)"; \
       else echo "no nvcc in the build base: a CPU-only jar"; fi
# the JRE: exactly the modules the jar needs (jdeps), without debug data (native too where binutils'
# objcopy is there), man pages or headers
RUN modules=$(jdeps --multi-release 17 --ignore-missing-deps --print-module-deps /fsdp4j.jar) \
    && echo "jlink modules: $modules" \
    && strip=$(command -v objcopy >/dev/null && echo --strip-debug || echo --strip-java-debug-attributes) \
    && jlink --add-modules "$modules" $strip --no-man-pages --no-header-files --compress=2 --output /jre

FROM ${RUNTIME_BASE}
# a user of our own without useradd, which minimal bases lack
COPY --from=build /jre /opt/fsdp4j/jre
COPY --from=build /fsdp4j.jar /opt/fsdp4j/fsdp4j.jar
RUN printf '#!/bin/sh\n# maxPhysicalBytes=0: tensors live off-heap; JavaCPP must not cap them by the heap size.\nexec /opt/fsdp4j/jre/bin/java -Dorg.bytedeco.javacpp.maxPhysicalBytes=0 ${FSDP4J_JAVA_OPTS:-} -jar /opt/fsdp4j/fsdp4j.jar "$@"\n' \
        > /usr/local/bin/fsdp4j \
    && chmod 755 /usr/local/bin/fsdp4j \
    && echo 'fsdp4j:x:10001:10001:fsdp4j:/home/fsdp4j:/usr/sbin/nologin' >> /etc/passwd \
    && echo 'fsdp4j:x:10001:' >> /etc/group \
    && mkdir -p /home/fsdp4j && chown 10001:10001 /home/fsdp4j
# a UTF-8 locale, so the run log's "≈" and "×" print as themselves (glibc has C.UTF-8 built in)
ENV LANG=C.UTF-8
USER fsdp4j
WORKDIR /home/fsdp4j
ENTRYPOINT ["fsdp4j"]
CMD ["--help"]
