#!/usr/bin/env bash
# Resolves Apache Kafka's jars from Maven Central into a cache outside the repository, once per
# machine: ${PYBROKER_KAFKA_CACHE:-$HOME/.cache/pybroker/kafka}/<version>/libs/*.jar, the class
# path of `bench/apache_kafka.py` (Kafka as an oracle beside pybroker in tests and benchmarks).
#
#   bash bench/kafka/resolve.sh [VERSION ...]      (default: 3.9.2 4.4.0)
#
# Each version is kafka_2.13 (the broker, kafka.Kafka) plus kafka-tools (the command-line tools)
# plus a logging backend:
#   3.9.2  kafka-tools brings slf4j-reload4j and reload4j, as the release tarball has them
#          (configured with -Dlog4j.configuration=file:...).
#   4.4.0  kafka-server brings log4j-api and log4j-core, but nothing binds SLF4J 1.7 (what
#          kafka_2.13 logs through) to them: add log4j-slf4j-impl, the SLF4J 1.x binder
#          (`mvn dependency:tree`; configured with -Dlog4j2.configurationFile=...).
# The jars are copied by a throwaway pom.xml in a temporary directory (`mvn dependency:
# copy-dependencies -DincludeScope=runtime`) into libs.partial, which becomes libs, marked by
# libs/.complete, only when every jar is there. A version with libs/.complete is left alone;
# concurrent runs wait for each other on <version>/.lock. On failure one line on stderr says which
# version and artifact failed (Maven's whole output is kept in <version>/resolve.log), and the
# exit status is non-zero. Jars are never committed.
set -euo pipefail

cache="${PYBROKER_KAFKA_CACHE:-$HOME/.cache/pybroker/kafka}"
dependency_plugin=org.apache.maven.plugins:maven-dependency-plugin:3.8.1

# The Maven artifacts (group:artifact:version) of one Kafka version.
artifacts_for() {
  local version=$1
  case "$version" in
    3.9.2)
      echo "org.apache.kafka:kafka_2.13:$version org.apache.kafka:kafka-tools:$version" ;;
    4.4.0)
      # log4j 2.25.5: the version kafka-server 4.4.0 depends on.
      echo "org.apache.kafka:kafka_2.13:$version org.apache.kafka:kafka-tools:$version" \
        "org.apache.logging.log4j:log4j-core:2.25.5 org.apache.logging.log4j:log4j-slf4j-impl:2.25.5" ;;
    *)
      return 1 ;;
  esac
}

write_pom() {
  local pom=$1 version=$2
  shift 2
  {
    echo '<project xmlns="http://maven.apache.org/POM/4.0.0">'
    echo '  <modelVersion>4.0.0</modelVersion>'
    echo "  <groupId>pybroker.bench</groupId><artifactId>kafka-$version</artifactId>"
    echo '  <version>1</version><packaging>pom</packaging>'
    echo '  <dependencies>'
    local coordinates group artifact artifact_version
    for coordinates in "$@"; do
      IFS=: read -r group artifact artifact_version <<<"$coordinates"
      echo "    <dependency><groupId>$group</groupId><artifactId>$artifact</artifactId><version>$artifact_version</version></dependency>"
    done
    echo '  </dependencies>'
    echo '</project>'
  } >"$pom"
}

# The first artifact Maven names in its errors, else its first error line.
failure_cause() {
  local log=$1 cause
  cause=$(grep -oE '(Could not (find|transfer) artifact|artifacts? could not be resolved:|Failure to find) [^ ]+' "$log" | head -n 1 || true)
  [ -n "$cause" ] || cause=$(grep -m 1 'ERROR' "$log" | sed -e 's/\x1b\[[0-9;]*m//g' | cut -c 1-200 || true)
  echo "${cause:-mvn failed without an error line}"
}

resolve() {
  local version=$1 dir="$cache/$1"
  local artifacts
  if ! artifacts=$(artifacts_for "$version"); then
    echo "resolve.sh: Kafka $version: unknown version (this script knows 3.9.2 and 4.4.0 and their logging jars)" >&2
    return 1
  fi
  [ -f "$dir/libs/.complete" ] && return 0
  mkdir -p "$dir"
  exec {lock}>"$dir/.lock"
  flock "$lock"
  if [ -f "$dir/libs/.complete" ]; then  # another run resolved it meanwhile
    exec {lock}>&-
    return 0
  fi
  local work status=0 started=$SECONDS
  work=$(mktemp -d)
  # shellcheck disable=SC2086  # artifacts is a space-separated list of coordinates
  write_pom "$work/pom.xml" "$version" $artifacts
  rm -rf "$dir/libs.partial"
  (cd "$work" && mvn -q -B "$dependency_plugin:copy-dependencies" -DincludeScope=runtime \
      -DoutputDirectory="$dir/libs.partial") >"$dir/resolve.log" 2>&1 || status=$?
  rm -rf "$work"
  if [ "$status" -ne 0 ] || ! compgen -G "$dir/libs.partial/*.jar" >/dev/null; then
    echo "resolve.sh: Kafka $version ($artifacts): $(failure_cause "$dir/resolve.log"); see $dir/resolve.log" >&2
    rm -rf "$dir/libs.partial"
    exec {lock}>&-
    return 1
  fi
  rm -rf "$dir/libs"
  mv "$dir/libs.partial" "$dir/libs"
  touch "$dir/libs/.complete"
  exec {lock}>&-
  echo "resolve.sh: Kafka $version: $(find "$dir/libs" -name '*.jar' | wc -l) jars in $dir/libs ($((SECONDS - started)) s)" >&2
}

if [ "$#" -eq 0 ]; then
  set -- 3.9.2 4.4.0
fi
command -v mvn >/dev/null 2>&1 || { echo "resolve.sh: mvn is not installed (apt-get install maven)" >&2; exit 1; }
for version in "$@"; do
  resolve "$version"
done
