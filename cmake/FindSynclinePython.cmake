# Finds what the PyTorch backend (python/) builds against, all from Debian:
#   SYNCLINE_PYTHON_EXECUTABLE  the Python that has python3-torch
#                               (default /usr/bin/python3: a python3 earlier on
#                               PATH, such as pyenv's, lacks Debian's torch)
#   python3-dev                 headers, and the extension suffix (SOABI)
#   pybind11-dev                pybind11/pybind11.h
#   python3-torch               torch/csrc/distributed/c10d/ProcessGroup.hpp
#                               and libtorch_python.so
# Sets SynclinePython_FOUND, and when found SYNCLINE_PYTHON_{SOABI,INCLUDE_DIRS},
# SYNCLINE_PYBIND11_INCLUDE_DIR, SYNCLINE_TORCH_PYTHON_{INCLUDE_DIRS,LIBDIR,LIBRARY}
# and the default SYNCLINE_PYTHON_INSTALL_DIR: the folder below the install
# prefix where that Python looks for modules (lib/python3/dist-packages for
# /usr, lib/python3.X/dist-packages for /usr/local on Debian; from sysconfig).
set(SynclinePython_FOUND OFF)
set(SYNCLINE_PYTHON_EXECUTABLE /usr/bin/python3 CACHE FILEPATH
  "The Python interpreter the syncline_torch module is built for")
if(NOT EXISTS "${SYNCLINE_PYTHON_EXECUTABLE}")
  return()
endif()
execute_process(
  COMMAND ${SYNCLINE_PYTHON_EXECUTABLE} -c [=[
import os, sys, sysconfig, importlib.util
spec = importlib.util.find_spec("torch")
torch_dir = os.path.dirname(spec.origin) if spec else ""
prefix = sys.argv[1]
schemes = sysconfig.get_scheme_names()
if prefix == "/usr" and "deb_system" in schemes:
    site = sysconfig.get_path("platlib", "deb_system", {"platbase": prefix, "base": prefix})
elif sysconfig.get_default_scheme() == "posix_local":
    site = os.path.join(prefix, os.path.relpath(sysconfig.get_path("platlib"), "/usr/local"))
else:
    site = sysconfig.get_path("platlib", vars={"platbase": prefix, "base": prefix})
print(sysconfig.get_config_var("SOABI"), sysconfig.get_path("include"), torch_dir,
      os.path.relpath(site, prefix), sep=";")
]=] ${CMAKE_INSTALL_PREFIX}
  OUTPUT_VARIABLE _py OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE _rc)
if(NOT _rc EQUAL 0)
  return()
endif()
list(GET _py 0 SYNCLINE_PYTHON_SOABI)
list(GET _py 1 _py_include)
list(GET _py 2 _torch_dir)
list(GET _py 3 _site_rel)
set(SYNCLINE_PYTHON_INSTALL_DIR "${_site_rel}" CACHE STRING
  "Where syncline_torch is installed, relative to the prefix")
find_path(SYNCLINE_PYBIND11_INCLUDE_DIR pybind11/pybind11.h)
if(NOT EXISTS "${_py_include}/Python.h" OR NOT SYNCLINE_PYBIND11_INCLUDE_DIR OR
   NOT EXISTS "${_torch_dir}/include/torch/csrc/distributed/c10d/ProcessGroup.hpp" OR
   NOT EXISTS "${_torch_dir}/lib/libtorch_python.so")
  return()
endif()
set(SYNCLINE_PYTHON_INCLUDE_DIRS ${_py_include})
set(SYNCLINE_TORCH_PYTHON_INCLUDE_DIRS ${_torch_dir}/include
    ${_torch_dir}/include/torch/csrc/api/include)
set(SYNCLINE_TORCH_PYTHON_LIBDIR ${_torch_dir}/lib)
set(SYNCLINE_TORCH_PYTHON_LIBRARY ${_torch_dir}/lib/libtorch_python.so)
# From the installed module's folder back to <prefix>/lib, for its RPATH.
file(RELATIVE_PATH SYNCLINE_PYTHON_TO_LIBDIR
  "/p/${SYNCLINE_PYTHON_INSTALL_DIR}/syncline_torch" "/p/${CMAKE_INSTALL_LIBDIR}")
set(SynclinePython_FOUND ON)
