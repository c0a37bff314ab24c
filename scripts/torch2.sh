#!/usr/bin/env bash
# The LibTorch-facing suite against LibTorch 2.x (PyTorch's pip wheel, which
# scripts/install-deps.sh installs beside Debian's 1.13): installs traceml from
# ./build (or $TRACEML_BUILD_DIR) into a prefix, builds the examples against
# that package and LibTorch 2.x as a user's program is built (find_package of
# both, -Werror), then runs every test that trains with the examples (ctest
# -L libtorch) on these builds, with 2.x's torchrun first on PATH. Nothing of
# traceml itself is compiled twice: it links no LibTorch. Arguments go to
# ctest (e.g. -R Profile). docs/libtorch-versions.md.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
build_dir="${TRACEML_BUILD_DIR:-build}"
out="$build_dir/torch2"
root=$(bash scripts/torch2-env.sh root)
venv=$(bash scripts/torch2-env.sh venv)
version=$(bash scripts/torch2-env.sh version)
mkdir -p "$out"
prefix="$(cd "$out" && pwd)/prefix"
rm -rf "$prefix"
cmake --install "$build_dir" --prefix "$prefix" >/dev/null
cmake -S examples -B "$out" -G Ninja -DTRACEML_WARNINGS_AS_ERRORS=ON \
  -DCMAKE_PREFIX_PATH="$prefix;$root" >"$out/configure.log" 2>&1 ||
  { cat "$out/configure.log"; exit 1; }
grep -E "^-- traceml:" "$out/configure.log" | sed 's/^/torch2.sh: /'
# The package stops a consumer whose CMAKE_PREFIX_PATH names only the wheel's
# share/cmake while Debian's libtorch-dev is installed (LibTorch's package
# would then link Debian's libtorch.so): with the fix, before anything builds.
if [ -e /usr/lib/x86_64-linux-gnu/libtorch.so ]; then
  mixed="$out/mixed"
  rm -rf "$mixed"
  if cmake -S examples -B "$mixed" -G Ninja -DCMAKE_PREFIX_PATH="$prefix;$root/share/cmake" \
    >"$mixed.log" 2>&1 || ! grep -q "would link another LibTorch's libtorch.so" "$mixed.log"; then
    cat "$mixed.log"
    echo "torch2.sh: a consumer mixing LibTorch 2.x's headers with Debian's libtorch.so was not stopped" >&2
    exit 1
  fi
  rm -rf "$mixed" "$mixed.log"
  echo "torch2.sh: a consumer that would mix two LibTorches is stopped at its configure"
fi
cmake --build "$out"
# The docs' recipes run build/bin/traceml beside build/bin/examples.
ln -sfn "$(cd "$build_dir/bin" && pwd)/traceml" "$out/bin/traceml"

# The ddp example takes Gloo's headers from Debian's libgloo-dev (the wheel
# ships none) while LibTorch 2.x carries its own Gloo: sound only while the
# program compiles no Gloo code of its own and holds Gloo's objects only
# behind pointers (docs/libtorch-versions.md). A symbol of namespace gloo
# defined in the program would break that.
if nm -C --defined-only "$out/bin/examples/ddp" | grep -E '^[0-9a-f]+ [TtWw] gloo::'; then
  echo "torch2.sh: the ddp example defines Gloo code of its own (above): its Gloo headers are not LibTorch $version's" >&2
  exit 1
fi
echo "torch2.sh: examples built against LibTorch $version in $((SECONDS - start)) s"

# PyTorch's wheels are built with Kineto: each capture leaves LibTorch's own
# trace too, which the profile tests then require.
PATH="$venv/bin:$PATH" TRACEML_TEST_EXAMPLES_DIR="$(cd "$out/bin/examples" && pwd)" \
  TRACEML_TEST_EXPECT_KINETO=1 TRACEML_TEST_TORCHRUN_2X=1 \
  ctest --test-dir "$build_dir" -L libtorch --output-on-failure -j "$(nproc)" "$@"
echo "torch2.sh: LibTorch $version suite took $((SECONDS - start)) s"
